export interface LabeledSelectProps {
  label: string;
  testId: string;
  value: string | number;
  options: readonly (string | number)[];
  onChange: (value: string) => void;
  /** An extra first option with the value "" and this text (e.g. "any"). */
  empty?: string;
}

/** A `<select>` of plain values under a label, as every filter bar uses. */
export function LabeledSelect({ label, testId, value, options, onChange, empty }: LabeledSelectProps) {
  // The current value stays selectable even when the list does not (yet) have it.
  const shown = value === "" || options.includes(value) ? options : [value, ...options];
  return (
    <label>
      {label}
      <select data-testid={testId} value={value} onChange={(e) => onChange(e.target.value)}>
        {empty === undefined ? null : <option value="">{empty}</option>}
        {shown.map((option) => (
          <option key={option} value={option}>
            {option}
          </option>
        ))}
      </select>
    </label>
  );
}
