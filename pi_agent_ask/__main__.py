from pi_agent_ask.cli import entry

entry()
