// The local Neo4j of symfonic-graph: Neo4j Community's embedded DBMS with its
// Bolt connector on a loopback address. Started and stopped by
// `symfonic-graph server start|stop`; never used in production.
//
// Usage: SYMFONIC_NEO4J_PASSWORD=... java -cp <neo4j jars>:<this class> Launcher <home> <host> <port>
// (the password travels in the environment, not on the command line)
// Prints "READY <version>" once Bolt accepts connections and shuts the DBMS
// down cleanly on SIGTERM.
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

import org.neo4j.configuration.Config;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.QueryExecutionException;
import org.neo4j.graphdb.config.Setting;
import org.neo4j.io.ByteUnit;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            // Neo4j's own threads would keep a failed JVM alive: exit so the caller sees it.
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        String password = System.getenv("SYMFONIC_NEO4J_PASSWORD");
        if (args.length != 3 || password == null || password.isEmpty()) {
            System.err.println("usage: SYMFONIC_NEO4J_PASSWORD=... Launcher <home> <host> <port>");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        String host = args[1];
        int port = Integer.parseInt(args[2]);

        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(home);
        Setting<Object> quiet = withoutBoltQuietPeriod(builder);
        // The test server (`./dev test`) re-plans a query at most once an hour: its database grows from
        // empty during one run, and re-planning every query as its statistics move cost about a sixth of
        // the suite's time. A server started without the variable keeps Neo4j's default.
        Duration replan = minReplanInterval();
        if (replan != null) {
            builder.setConfig(GraphDatabaseSettings.cypher_min_replan_interval, replan);
        }
        DatabaseManagementService dbms = builder
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                .setConfig(BoltConnector.advertised_address, new SocketAddress(host, port))
                .setConfig(HttpConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, true)
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(512))
                .setConfig(GraphDatabaseSettings.transaction_timeout, Duration.ofMinutes(5))
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(dbms::shutdown, "neo4j-shutdown"));

        // The embedded API runs with full rights, so it can set the password
        // the Python side generated; no "change on first login" dance.
        try {
            dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME).executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        } catch (QueryExecutionException e) {
            // A restart on the same data keeps its password: nothing to change.
            if (!e.getMessage().contains("cannot be the same")) {
                throw e;
            }
        }

        String version = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME).executeTransactionally(
                "CALL dbms.components() YIELD versions RETURN versions[0] AS v",
                Map.of(),
                result -> (String) result.next().get("v"));
        if (quiet != null) {  // what the server runs with, read back from its own configuration
            Config config = ((GraphDatabaseAPI) dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME))
                    .getDependencyResolver().resolveDependency(Config.class);
            System.out.println("bolt shutdown quiet period: " + config.get(quiet));
        }
        if (replan != null) {
            System.out.println("cypher min replan interval: " + replan);
        }
        System.out.println("READY " + version);
        System.out.flush();
        Thread.currentThread().join();
    }

    /** {@code SYMFONIC_NEO4J_MIN_REPLAN_SECONDS} as a duration, or null when it is not set. */
    private static Duration minReplanInterval() {
        String seconds = System.getenv("SYMFONIC_NEO4J_MIN_REPLAN_SECONDS");
        if (seconds == null || seconds.isEmpty()) {
            return null;
        }
        try {
            return Duration.ofSeconds(Long.parseUnsignedLong(seconds));
        } catch (NumberFormatException e) {
            System.err.println("SYMFONIC_NEO4J_MIN_REPLAN_SECONDS must be a whole number of seconds, got \""
                    + seconds + "\"; fix or unset it and start again");
            System.exit(2);
            return null;
        }
    }

    /**
     * On shutdown, Bolt's two groups of network threads each wait a quiet period of 5 s for
     * late work: a stop took ~10 s of waiting for nothing. This server has no clients to be
     * polite to once it is told to stop, so the quiet period is zero.
     * The setting is internal and changed type (5.x: whole seconds; 2025+: a Duration), so it is
     * found by name; a release without it keeps its default.
     */
    @SuppressWarnings("unchecked")
    private static Setting<Object> withoutBoltQuietPeriod(DatabaseManagementServiceBuilder builder) {
        try {
            Setting<Object> quiet = (Setting<Object>) GraphDatabaseInternalSettings.class
                    .getField("netty_server_shutdown_quiet_period").get(null);
            builder.setConfig(quiet, quiet.defaultValue() instanceof Duration ? Duration.ZERO : (Object) 0);
            return quiet;
        } catch (ReflectiveOperationException e) {
            return null;  // not in this release: stops take a little longer, nothing else changes
        }
    }
}
