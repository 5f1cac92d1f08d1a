// Apache Kafka 3.9's own ACL and SCRAM znode codecs, for tests/cluster/security/test_security_vs_kafka.py.
//
//   java -cp '.cache/kafka39/libs/*' tests/cluster/security/KafkaSecurityZnodes.java < requests
//
// One JSON request a line: {"kind": K, "args": {...}, "josefk": base64 of josefk's bytes}.
// One JSON answer a line: {"path": the znode path Kafka uses, "kafka": base64 of the bytes
// Kafka writes from args, "decoded": what Kafka reads from josefk's bytes}, or
// {"error": "..."} when Kafka refuses them.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import kafka.zk.AclChangeNode;
import kafka.zk.ConfigEntityChangeNotificationSequenceZNode;
import kafka.zk.ConfigEntityZNode;
import kafka.zk.ExtendedAclChangeStore$;
import kafka.zk.LiteralAclChangeStore$;
import kafka.zk.ResourceZNode;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.scram.ScramCredential;
import org.apache.kafka.common.security.scram.internals.ScramCredentialUtils;
import org.apache.kafka.common.utils.Sanitizer;
import org.apache.kafka.security.authorizer.AclEntry;

public class KafkaSecurityZnodes {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Base64.Encoder B64 = Base64.getEncoder();

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode request = JSON.readTree(line);
            ObjectNode answer = JSON.createObjectNode();
            try {
                handle(request.get("kind").asText(), request.get("args"),
                       Base64.getDecoder().decode(request.get("josefk").asText()), answer);
            } catch (Exception e) {
                answer.put("error", e.toString());
            }
            System.out.println(JSON.writeValueAsString(answer));
        }
    }

    static ResourcePattern pattern(JsonNode args) {
        return new ResourcePattern(ResourceType.valueOf(args.get("resource_type").asText()),
            args.get("name").asText(), PatternType.valueOf(args.get("pattern_type").asText()));
    }

    static void handle(String kind, JsonNode args, byte[] josefk, ObjectNode answer) throws Exception {
        switch (kind) {
            case "acls": {
                // A Scala immutable set keeps insertion order up to four elements.
                scala.collection.immutable.Set<AclEntry> acls = scala.collection.immutable.Set$.MODULE$.empty();
                for (JsonNode e : args.get("entries")) {
                    acls = acls.$plus(new AclEntry(new AccessControlEntry(e.get(0).asText(), e.get(1).asText(),
                        AclOperation.valueOf(e.get(2).asText()), AclPermissionType.valueOf(e.get(3).asText()))));
                }
                answer.put("path", ResourceZNode.path(pattern(args)));
                answer.put("kafka", B64.encodeToString(ResourceZNode.encode(acls)));
                ArrayNode decoded = answer.putArray("decoded");
                for (AclEntry e : AclEntry.fromBytes(josefk)) {
                    decoded.addArray().add(e.principal()).add(e.host()).add(e.operation().name())
                        .add(e.permissionType().name());
                }
                break;
            }
            case "acl_change": {
                ResourcePattern resource = pattern(args);
                boolean literal = resource.patternType() == PatternType.LITERAL;
                AclChangeNode node = literal ? LiteralAclChangeStore$.MODULE$.createChangeNode(resource)
                    : ExtendedAclChangeStore$.MODULE$.createChangeNode(resource);
                answer.put("path", node.path());
                answer.put("kafka", B64.encodeToString(node.bytes()));
                ResourcePattern back = literal ? LiteralAclChangeStore$.MODULE$.decode(josefk)
                    : ExtendedAclChangeStore$.MODULE$.decode(josefk);
                answer.putArray("decoded").add(back.resourceType().name()).add(back.name())
                    .add(back.patternType().name());
                break;
            }
            case "user_config": {
                String sanitized = Sanitizer.sanitize(args.get("user").asText());
                Properties config = new Properties();
                args.get("config").fields().forEachRemaining(f -> config.setProperty(f.getKey(), f.getValue().asText()));
                answer.put("path", ConfigEntityZNode.path("users", sanitized));
                answer.put("kafka", B64.encodeToString(ConfigEntityZNode.encode(config)));
                answer.put("change", B64.encodeToString(
                    ConfigEntityChangeNotificationSequenceZNode.encode("users/" + sanitized)));
                answer.put("desanitized", Sanitizer.desanitize(sanitized));
                ObjectNode decoded = answer.putObject("decoded");
                ConfigEntityZNode.decode(josefk).forEach((k, v) -> decoded.put((String) k, (String) v));
                break;
            }
            case "credential": {
                ScramCredential credential = new ScramCredential(
                    Base64.getDecoder().decode(args.get("salt").asText()),
                    Base64.getDecoder().decode(args.get("stored_key").asText()),
                    Base64.getDecoder().decode(args.get("server_key").asText()),
                    args.get("iterations").asInt());
                answer.put("kafka", B64.encodeToString(
                    ScramCredentialUtils.credentialToString(credential).getBytes(StandardCharsets.UTF_8)));
                break;
            }
            case "parse_credential": {
                ScramCredential back = ScramCredentialUtils.credentialFromString(
                    new String(josefk, StandardCharsets.UTF_8));
                answer.putObject("decoded").put("salt", B64.encodeToString(back.salt()))
                    .put("stored_key", B64.encodeToString(back.storedKey()))
                    .put("server_key", B64.encodeToString(back.serverKey()))
                    .put("iterations", back.iterations());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }
}
