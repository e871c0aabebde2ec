import sys

from kafka_runbooks.localstack.cli import main

sys.exit(main())
