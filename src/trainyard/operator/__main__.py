"""``python -m trainyard.operator``: the operator as its own process (see ``trainyard.operator.main``)."""

from trainyard.operator.main import main

main()
