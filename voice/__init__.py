"""The voice runtime: AI agents on phone calls, and the fakes its tests run against."""
