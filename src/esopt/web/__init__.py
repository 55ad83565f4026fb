"""Local WebArena-Lite-style sites: seeded SQLite data, Flask apps, servers on 127.0.0.1,
a text browser (HTML -> accessibility tree) and the tasks with their programmatic checks."""
