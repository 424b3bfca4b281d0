"""Operations: what an operator runs. Doctor's checks, seed files (read within bounds, written whole), the demo.

The top of the library's layers (below the CLI that calls it): the demo
runs an agent through the integrations.
"""
