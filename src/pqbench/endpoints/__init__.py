"""The endpoints of a measurement: nginx as the server, pqtimer as the client."""
