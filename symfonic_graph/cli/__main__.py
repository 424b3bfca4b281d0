import sys

from symfonic_graph.cli import main

sys.exit(main())
