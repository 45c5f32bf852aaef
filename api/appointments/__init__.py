"""Appointments: contacts booked into the free slots of calendars (CONTRACT 10)."""
