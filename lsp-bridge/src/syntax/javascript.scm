; Class fields, which the JavaScript grammar calls `field_definition` (TypeScript has its own).

(field_definition
    property: (property_identifier) @name) @definition.field
