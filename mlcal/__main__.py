"""``python -m mlcal`` runs the command line."""

import sys

from mlcal.cli import main

sys.exit(main())
