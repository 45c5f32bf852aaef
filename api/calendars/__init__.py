"""Calendars: bookable hours in a timezone, and their free slots (CONTRACT 10)."""
