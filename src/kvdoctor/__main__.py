import sys

from kvdoctor.cli import main

sys.exit(main())
