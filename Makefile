.PHONY: setup check test lint typecheck demo bench
setup:
	./scripts/setup.sh
check:
	./scripts/test.sh
lint:
	.venv/bin/ruff check src tests bench
typecheck:
	.venv/bin/mypy
test:
	.venv/bin/python -m pytest -q
demo:
	./scripts/demo.sh
bench:
	.venv/bin/python bench/run.py
