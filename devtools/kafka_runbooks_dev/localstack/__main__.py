import sys

from kafka_runbooks_dev.localstack.cli import main

sys.exit(main())
