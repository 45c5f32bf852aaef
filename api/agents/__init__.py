"""AI voice agents: create-agent and the agent reads."""
