-- One human Save of a 4 KiB memory document, as memory.services.memory_save sends it (the
-- read of the file, its last size and the data key in autocommit, then BEGIN, the version
-- bump by compare-and-set with the revision insert in one statement, the org's quota read
-- that a Save changing the document's length makes, COMMIT), for pgbench
-- (bench/bench_http_throughput.py). Client :client_id writes to its own workspace, so no two
-- clients touch one row. The 4,124 bytes of "ciphertext" (4 KiB sealed by AES-GCM) are made
-- by the server.
\set workspace :first_workspace + :client_id
SELECT f.id AS file_id, f.current_version AS version,
        (SELECT size_bytes FROM workspaces_fileversion
            WHERE file_id = f.id AND version = f.current_version) AS previous_bytes,
        (SELECT wrapped_key FROM workspaces_workspacekey WHERE workspace_id = :workspace)
            AS wrapped_key
    FROM workspaces_file f
    WHERE f.workspace_id = :workspace AND f.path = '.zudotext/memory/memory.md' \gset
BEGIN;
WITH bumped AS (
    UPDATE workspaces_file SET current_version = current_version + 1, updated_at = now()
        WHERE id = :file_id AND path = '.zudotext/memory/memory.md'
            AND current_version = :version AND deleted_at IS NULL
        RETURNING id
)
INSERT INTO workspaces_fileversion (file_id, version, ciphertext, ciphertext_sha256,
        size_bytes, author_kind, change_kind, author_id, created_at)
    SELECT id, :version + 1, decode(repeat('5a', 4124), 'hex'), repeat('0', 64), 4096,
        'human', 'save', :author, now()
    FROM bumped;
SELECT o.memory_quota_bytes FROM workspaces_org o JOIN workspaces_team t ON t.org_id = o.id
    WHERE t.id = :team FOR KEY SHARE OF o;
COMMIT;
