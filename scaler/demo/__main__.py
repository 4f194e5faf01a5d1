import importlib.util
import sys

_missing = [name for name in ("rich", "matplotlib") if importlib.util.find_spec(name) is None]
if _missing:
    sys.exit(
        f"demo: needs {' and '.join(_missing)}: pip install 'queue-age-scaler[demo]' "
        "(scripts/demo installs them)"
    )

from scaler.demo.main import main  # noqa: E402

sys.exit(main())
