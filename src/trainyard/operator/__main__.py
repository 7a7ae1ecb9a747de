"""``python -m trainyard.operator``: the operator as its own process (see ``trainyard.operator.main``)."""

import sys

from trainyard.operator.main import main

sys.exit(main())
