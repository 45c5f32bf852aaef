"""AI voice agents: create-agent, the agent reads, change and deletion, and their speech vendors."""
