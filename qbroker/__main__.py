"""``python -m qbroker``: the same as the ``qbroker`` command."""

import sys

from qbroker.cli import main

sys.exit(main())
