// The official TypeScript MCP SDK client for `python -m bench.mcp --node`.
//
//     node bench/mcp_node.mjs NODE_MODULES_DIR
//
// Reads JSON lines on stdin, answers each with one JSON line on stdout:
//   {"command", "args", "env", "conversation"}  ->  {"tools": n}
//     spawns `arbiter mcp` over stdio, lists its tools (the client compiles
//     each output schema with Ajv then), joins the bench's conversation;
//   {"query"}  ->  {"checked": ns, "unchecked": ns, "validate": ns}
//     the `recall` tool with its defaults, timed twice back to back: with the
//     client's output validation as it is by default, and with it skipped (a
//     diagnostic, like the Python run's `unchecked`); `validate` is the
//     checked call's validation alone, timed around the compiled validator.
// End of input closes the client. The SDK is loaded from NODE_MODULES_DIR
// (the bench installs it into .ci/node, out of the source tree).

import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const require = createRequire(path.join(path.resolve(process.argv[2]), "_"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { AjvJsonSchemaValidator } = require("@modelcontextprotocol/sdk/validation/ajv");

// The SDK's default validator, behind a switch: `callTool` runs the compiled
// validator unless `skip` is set, so one session serves both timings.
let skip = false;
let validateNs = 0;
const ajv = new AjvJsonSchemaValidator();
const switchable = {
  getValidator(schema) {
    const check = ajv.getValidator(schema);
    return (input) => {
      if (skip) return { valid: true, data: input, errorMessage: undefined };
      const t = process.hrtime.bigint();
      const result = check(input);
      validateNs = Number(process.hrtime.bigint() - t);
      return result;
    };
  },
};

let client;
let calls = 0;

async function recall(query) {
  const t = process.hrtime.bigint();
  const r = await client.callTool({ name: "recall", arguments: { query } });
  const ns = Number(process.hrtime.bigint() - t);
  if (r.isError) throw new Error(`recall ${JSON.stringify(query)}: ${r.content[0].text}`);
  return ns;
}

async function handle(message) {
  if (message.query === undefined) {
    client = new Client({ name: "bench-node", version: "0" }, { jsonSchemaValidator: switchable });
    await client.connect(new StdioClientTransport({ command: message.command, args: message.args, env: message.env }));
    const { tools } = await client.listTools();
    const joined = await client.callTool({ name: "conversation", arguments: { id: message.conversation } });
    if (joined.isError) throw new Error(`conversation: ${joined.content[0].text}`);
    return { tools: tools.length };
  }
  // The two calls take turns going first, so that repeating the same query
  // favours neither.
  const ns = {};
  for (const unchecked of calls++ % 2 === 0 ? [false, true] : [true, false]) {
    skip = unchecked;
    ns[unchecked ? "unchecked" : "checked"] = await recall(message.query);
    if (!unchecked) ns.validate = validateNs;
  }
  skip = false;
  return ns;
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  process.stdout.write(JSON.stringify(await handle(JSON.parse(line))) + "\n");
}
await client?.close();
