"""`python -m pgbenchlab.cli`."""

import sys

from pgbenchlab.cli import main

sys.exit(main())
