// JSON objects as YAML for reading (the detail panel): block style, keys in the object's own
// order, strings quoted when YAML would read them as something else.

const PLAIN = /^[A-Za-z_./][A-Za-z0-9_./ -]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|y|n)$/i;

function scalar(value) {
  if (value === null || value === undefined) {
    return "null";
  }
  if (typeof value === "number" || typeof value === "boolean") {
    return String(value);
  }
  const text = String(value);
  if (text !== "" && PLAIN.test(text) && !RESERVED.test(text) && !text.endsWith(" ")) {
    return text;
  }
  return JSON.stringify(text);
}

function isEmpty(value) {
  return (
    (Array.isArray(value) && value.length === 0) ||
    (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0)
  );
}

function block(value, indent) {
  const pad = "  ".repeat(indent);
  const lines = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item !== null && typeof item === "object" && !isEmpty(item)) {
        const inner = block(item, indent + 1);
        lines.push(`${pad}- ${inner[0].trimStart()}`, ...inner.slice(1));
      } else {
        lines.push(`${pad}- ${isEmpty(item) ? JSON.stringify(item) : scalar(item)}`);
      }
    }
    return lines;
  }
  for (const [key, item] of Object.entries(value)) {
    const name = scalar(key);
    if (item !== null && typeof item === "object" && !isEmpty(item)) {
      lines.push(`${pad}${name}:`, ...block(item, Array.isArray(item) ? indent : indent + 1));
    } else if (typeof item === "string" && item.includes("\n")) {
      lines.push(`${pad}${name}: |-`, ...item.split("\n").map((line) => `${pad}  ${line}`));
    } else {
      lines.push(`${pad}${name}: ${isEmpty(item) ? JSON.stringify(item) : scalar(item)}`);
    }
  }
  return lines;
}

export function toYAML(value) {
  if (value === null || typeof value !== "object") {
    return `${scalar(value)}\n`;
  }
  return `${block(value, 0).join("\n")}\n`;
}
