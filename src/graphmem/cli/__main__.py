"""``python -m graphmem.cli``: the same as the ``graphmem`` console script."""

import sys

from graphmem.cli import main

sys.exit(main())
