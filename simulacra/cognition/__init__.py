"""Offline cognition: routine-following plans, conversations built from retrieved memories."""
