from pi_agent_ask.cli import main

raise SystemExit(main())
