"""``python -m graphmem.agent_hooks AGENT EVENT``: the same as ``graphmem hook AGENT EVENT``."""

import sys

from .run import main

sys.exit(main(sys.argv[1:]))
