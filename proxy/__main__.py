"""`python -m proxy` runs the CLI."""

import sys

from proxy.cli import main

sys.exit(main())
