// name: migrations_applied
// params:
// returns: version
// mode: read
// Versions of the schema migrations already applied to this database.
MATCH (m:SymfonicMigration) RETURN m.version AS version ORDER BY version;

// name: migration_record
// params: version, name
// returns: version
// mode: write
MERGE (m:SymfonicMigration {version: $version})
ON CREATE SET m.name = $name, m.applied_at = datetime()
RETURN m.version AS version;

// name: server_components
// params:
// returns: name, version, edition
// mode: read
CALL dbms.components() YIELD name, versions, edition
RETURN name, versions[0] AS version, edition;
