// For each line of hex on stdin: the bytes read as jute's
// BinaryInputArchive.readString reads them (new String(bytes, UTF_8)),
// printed as standard UTF-8, and that string written back by
// BinaryOutputArchive.writeString (without its length), both in hex.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.jute.BinaryOutputArchive;

public class JuteStrings {
    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x & 0xff));
        }
        return s.toString();
    }

    private static byte[] unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String s = new String(unhex(line.trim()), StandardCharsets.UTF_8);
            ByteArrayOutputStream written = new ByteArrayOutputStream();
            BinaryOutputArchive.getArchive(written).writeString(s, "s");
            byte[] w = written.toByteArray();
            out.append(hex(s.getBytes(StandardCharsets.UTF_8)))
                .append(' ')
                .append(hex(Arrays.copyOfRange(w, 4, w.length)))
                .append('\n');
        }
        System.out.print(out);
    }
}
