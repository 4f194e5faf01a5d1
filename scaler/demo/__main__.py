import sys

from scaler.demo.main import main

sys.exit(main())
