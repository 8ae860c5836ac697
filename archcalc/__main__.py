"""``python -m archcalc`` is the ``archcalc`` command."""

import sys

try:
    from archcalc.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line's module is imported
    print("archcalc: interrupted", file=sys.stderr)
    sys.exit(130)
sys.exit(main())
