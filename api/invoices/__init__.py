"""Invoices: create, read, update, payment links, marking paid."""
