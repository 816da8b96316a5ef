"""Memory spaces: quota-governed trees of Markdown documents, addressed by a handle.

`handle` names a space; `store` is the seam every writer meets (the `MemoryStore` protocol,
with a database and a filesystem adapter); `services` is the one write path in front of it;
`archive` exports a whole space as one archive and imports one through that write path.
"""
