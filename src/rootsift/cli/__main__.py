"""``python -m rootsift.cli``: the command line."""

from rootsift.cli import main

if __name__ == "__main__":
    main()
