import sys

from kfcompile.cli import run

sys.exit(run())
