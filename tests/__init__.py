"""The test suite (``./dev test``, see the README).

Bytecode caches are written even when ``PYTHONDONTWRITEBYTECODE`` is set, as
some machines set it for every process. Without them every run compiles the
package and rewrites the asserts of each test module again, and every Python
process a test starts (the CLI's real entry point, the documented programs)
compiles the package once more: on a 2-core machine, collecting the fast
suite took 6.6-8 s instead of 3-3.6 s, and the fast suite 31-37 s instead of
27 s. The caches go to the usual ``__pycache__`` folders, which git ignores;
where they cannot be written, Python and pytest carry on without them. This
runs before ``conftest.py`` and every test module.
"""

import sys

sys.dont_write_bytecode = False
