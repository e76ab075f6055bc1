from orchestrator._entry import main

main()
