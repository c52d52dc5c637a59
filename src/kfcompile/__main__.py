import sys

from kfcompile.cli import main

sys.exit(main())
