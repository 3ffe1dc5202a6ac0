"""Input handling for live streams: pull, push and the adaptive Go4Risk switch."""
