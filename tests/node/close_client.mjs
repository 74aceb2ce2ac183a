// A client written with the official TypeScript MCP SDK that ends its session while a call
// waits for the person, for tests/test_mcp_typescript.py. Usage: node close_client.mjs PYTHON
// [server args...]. It shows forms itself (form elicitation) but answers none: when the form
// of its foreground question arrives it closes the connection (the SDK closes the server's
// standard input, as MCP says a stdio session ends) and prints the call's outcome, one JSON
// line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [python, ...serverArgs] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "pi_agent_ask", "mcp", ...serverArgs],
  env: process.env,
  stderr: "inherit",
});
const client = new Client(
  { name: "ts-close-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
let shown;
const formShown = new Promise((resolve) => {
  shown = resolve;
});
client.setRequestHandler(ElicitRequestSchema, async () => {
  shown();
  return new Promise(() => {}); // the person never answers here
});
await client.connect(transport);

const ask = {
  questions: [
    {
      id: "db",
      prompt: "Which database?",
      options: [
        { label: "Postgres", value: "pg" },
        { label: "SQLite", value: "lite" },
      ],
    },
  ],
};
const outcome = client.callTool({ name: "ask_user", arguments: ask }).then(
  (result) => ({ result }),
  (error) => ({ error: String(error) }),
);
await formShown;
await client.close(); // standard input closed; a server still running 2 s later gets SIGTERM
process.stdout.write(JSON.stringify({ event: "closed", ...(await outcome) }) + "\n");
