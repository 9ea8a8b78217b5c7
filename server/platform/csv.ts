/**
 * CSV (RFC 4180) cells that a spreadsheet opens as text. A cell that begins with = + - @ (or a tab or
 * carriage return, which some spreadsheets skip before reading a formula) is prefixed with ' so it is
 * never run as a formula (OWASP "CSV injection"): resource URLs, descriptions and failure reasons come
 * from sellers and buyers.
 */
export function csvCell(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export const csvLine = (cells: Array<string | number | null | undefined>) => `${cells.map(csvCell).join(',')}\r\n`;
