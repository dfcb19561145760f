"""``python -m logdevice.tools.ldshell``: ``ldshell`` without its console script."""

import sys

from logdevice.tools.ldshell.main import main

sys.exit(main())
