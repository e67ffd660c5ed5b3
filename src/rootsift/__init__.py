"""rootsift: finds why production broke, from the telemetry you already have."""

from rootsift.api import Rootsift, default_data_dir
from rootsift.query.spec import Calculation, QuerySpec

__version__ = "0.1.0"
__all__ = ["Rootsift", "QuerySpec", "Calculation", "default_data_dir", "__version__"]
