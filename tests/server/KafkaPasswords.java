// Apache Kafka 3.9's password encoder (org.apache.kafka.security.PasswordEncoder), for
// tests/server/test_passwords.py.
//
//   java -cp '.cache/kafka39/libs/*' tests/server/KafkaPasswords.java < requests
//
// One request a line, tab-separated: "encode", secret, key factory ("-": the default),
// cipher, key length, iterations, password; or "decode", secret, cipher, encoded value
// (Kafka picks how to read the cipher's parameters from its own cipher setting).
// One answer a line: the encoded value, the decoded password, or "error: ...".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.security.PasswordEncoder;

public class KafkaPasswords {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            try {
                if (f[0].equals("encode")) {
                    PasswordEncoder encoder = PasswordEncoder.encrypting(new Password(f[1]),
                        f[2].equals("-") ? null : f[2], f[3], Integer.parseInt(f[4]), Integer.parseInt(f[5]));
                    System.out.println(encoder.encode(new Password(f[6])));
                } else {
                    PasswordEncoder decoder = PasswordEncoder.encrypting(new Password(f[1]), null,
                        f[2], 128, 4096);
                    System.out.println(decoder.decode(f[3]).value());
                }
            } catch (Exception e) {
                System.out.println("error: " + e.getClass().getSimpleName());
            }
        }
    }
}
