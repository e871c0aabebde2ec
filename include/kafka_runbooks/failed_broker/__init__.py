"""Failed-broker reassignment (issue 5): failure tracking, planning, throttled chunked execution."""
