"""`python -m benchmarks [--json] [--only SECTION]`: see benchmarks/bench.py."""

import sys

from benchmarks.bench import main

sys.exit(main())
