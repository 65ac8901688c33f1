from procflow.cli import main

main()
