<?php
/**
 * \WPBench\Runtime\Preservation: before/after snapshots of posts and users for test-authored PHP, so an
 * assertion can say "nothing changed but what the task allows" (upstream WP-Bench's helper of that name).
 *
 *     // runtime_checks.setup, after creating fixtures (the candidate has not run yet):
 *     $GLOBALS['before_posts'] = \WPBench\Runtime\Preservation::capture_posts();
 *     $GLOBALS['before_users'] = \WPBench\Runtime\Preservation::capture_users();
 *     // a custom_assertion:
 *     return $GLOBALS['before_posts']->preserved( array(
 *         $id      => array( 'fields' => array( 'post_author' ), 'meta' => array( '_x' ),
 *                           'meta_prefixes' => array( '_legacy_' ), 'terms' => array( 'category' ) ),
 *         $gone_id => array( 'deleted' => true ),
 *     ) );
 *
 * What a snapshot holds, read from the database rows (not the object cache, not filtered):
 * - posts: every post whose post_type is not `revision`: its posts row plus `ancestors` and `page_template`
 *   (WP_Post::to_array() without the derived post_category and tags_input), every postmeta row as stored (serialized text, so types,
 *   duplicate values and missing keys all count), and its category and post_tag term IDs (unordered);
 * - users: every account: its users row and every usermeta row as stored.
 * preserved() returns true only when every captured record is unchanged except what $allowances declares
 * for that record ID: `fields` (columns), `meta` (keys), `meta_prefixes` (key prefixes), `terms`
 * (taxonomies; posts only), `deleted => true` (the record must be gone). There are no automatic
 * exemptions (modified dates, _edit_lock, ...). Records created after the capture are not checked.
 * An allowance for an ID the snapshot does not hold, or an allowance key not listed here, throws an
 * InvalidArgumentException (the assertion fails naming it). count( $snapshot ) is the number of captured
 * records; differences() lists what the last preserved() call found.
 *
 * Trust: the before-state lives in a private static array of this class, never in the snapshot object
 * (which holds a number), and capturing ends when the runner includes the candidate (seal(), called only
 * by the runner through a bound closure, like Lifecycle's snapshot): from then on capture_*() throws, so
 * neither the candidate nor anything it hooks can take or replace a snapshot. The globals that held
 * snapshots at that moment are put back before every assertion and teardown (restore()), so overwriting
 * `$GLOBALS['before_posts']` with a look-alike gains nothing. Snapshot objects cannot be cloned,
 * serialized or unserialized. As with Lifecycle this is a convenience for tests, not a security
 * boundary: candidate code that goes out of its way (Reflection) runs in the same process.
 */

namespace WPBench\Runtime;

final class Preservation implements \Countable {
	/** Allowance keys, by snapshot kind. */
	private const ALLOWANCES = array(
		'posts' => array( 'fields', 'meta', 'meta_prefixes', 'terms', 'deleted' ),
		'users' => array( 'fields', 'meta', 'meta_prefixes', 'deleted' ),
	);

	/** WP_Post::to_array() fields derived from term relationships; compared as `terms` instead. */
	private const DERIVED_POST_FIELDS = array( 'post_category', 'tags_input' );

	/** Taxonomies a post snapshot compares. */
	private const POST_TAXONOMIES = array( 'category', 'post_tag' );

	/**
	 * Before-states: handle => array{kind: string, records: array<int, array>}.
	 *
	 * @var array<int, array{kind: string, records: array<int, array<string, mixed>>}>
	 */
	private static array $snapshots = array();

	private static bool $sealed = false;

	/** Globals that held a snapshot when the candidate was about to run. @var array<string, self> */
	private static array $pinned = array();

	/** What the last preserved() call of each handle found. @var array<int, list<string>> */
	private static array $differences = array();

	private function __construct( private readonly int $handle ) {
	}

	/** Every non-revision post: row, stored meta, category and tag IDs. */
	public static function capture_posts(): self {
		return self::capture( 'posts' );
	}

	/** Every user account: row and stored meta. */
	public static function capture_users(): self {
		return self::capture( 'users' );
	}

	/**
	 * True when every captured record is as it was, but for what $allowances declares for its ID.
	 *
	 * @param array<int|string, array<string, mixed>> $allowances record ID => allowance.
	 * @throws \InvalidArgumentException An ID the snapshot does not hold, or an unknown allowance key.
	 */
	public function preserved( array $allowances = array() ): bool {
		$before = self::$snapshots[ $this->handle ];
		$kind   = $before['kind'];
		$rules  = array();
		foreach ( $allowances as $id => $allow ) {
			if ( ! \is_int( $id ) && ! ( \is_string( $id ) && \preg_match( '/^[0-9]+$/', $id ) ) ) {
				throw new \InvalidArgumentException( "Preservation: record ID " . \var_export( $id, true ) . ' is not an ID' );
			}
			$id = (int) $id;
			if ( ! isset( $before['records'][ $id ] ) ) {
				throw new \InvalidArgumentException( "Preservation: the $kind snapshot holds no record $id" );
			}
			if ( ! \is_array( $allow ) ) {
				throw new \InvalidArgumentException( "Preservation: the allowance for record $id is not an array" );
			}
			$unknown = \array_diff( \array_map( 'strval', \array_keys( $allow ) ), self::ALLOWANCES[ $kind ] );
			if ( $unknown ) {
				throw new \InvalidArgumentException( "Preservation: unknown allowance key(s) for record $id: " . \implode( ', ', $unknown ) . ' (known: ' . \implode( ', ', self::ALLOWANCES[ $kind ] ) . ')' );
			}
			foreach ( array( 'fields', 'meta', 'meta_prefixes', 'terms' ) as $list ) {
				if ( isset( $allow[ $list ] ) && ( ! \is_array( $allow[ $list ] ) || \array_filter( $allow[ $list ], static fn( $v ) => ! \is_string( $v ) ) ) ) {
					throw new \InvalidArgumentException( "Preservation: $list for record $id must be a list of strings" );
				}
			}
			if ( isset( $allow['deleted'] ) && ! \is_bool( $allow['deleted'] ) ) {
				throw new \InvalidArgumentException( "Preservation: deleted for record $id must be true or false" );
			}
			$rules[ $id ] = $allow;
		}
		$now   = self::read( $kind, \array_keys( $before['records'] ) );
		$found = array();
		foreach ( $before['records'] as $id => $was ) {
			$allow = $rules[ $id ] ?? array();
			$is    = $now[ $id ] ?? null;
			if ( true === ( $allow['deleted'] ?? false ) ) {
				if ( null !== $is ) {
					$found[] = "record $id still exists (deleted was required)";
				}
				continue;
			}
			if ( null === $is ) {
				$found[] = "record $id was deleted";
				continue;
			}
			$found = \array_merge( $found, self::compare( $id, $was, $is, $allow ) );
		}
		self::$differences[ $this->handle ] = $found;
		return ! $found;
	}

	/** @return list<string> What the last preserved() call found changed (empty: nothing). */
	public function differences(): array {
		return self::$differences[ $this->handle ] ?? array();
	}

	/** How many records were captured. */
	public function count(): int {
		return \count( self::$snapshots[ $this->handle ]['records'] );
	}

	public function __clone() {
		throw new \LogicException( 'Preservation: snapshots cannot be cloned' );
	}

	/** @return array<never> */
	public function __serialize(): array {
		throw new \LogicException( 'Preservation: snapshots cannot be serialized' );
	}

	/** @param array<mixed> $data */
	public function __unserialize( array $data ): void {
		throw new \LogicException( 'Preservation: snapshots cannot be unserialized' );
	}

	/**
	 * Ends capturing and pins every global that holds a snapshot now (setup's `$GLOBALS['before_posts']`).
	 * The runner calls this right before it includes the candidate, through a bound closure.
	 */
	private static function seal(): void {
		self::$sealed = true;
		foreach ( $GLOBALS as $name => $value ) {
			if ( $value instanceof self ) {
				self::$pinned[ $name ] = $value;
			}
		}
	}

	/**
	 * Puts the pinned snapshots back into their globals: the runner calls this before each assertion and
	 * teardown, so a candidate that overwrote `$GLOBALS['before_posts']` (say, with an object whose
	 * preserved() always says true) is not what the assertion asks.
	 */
	private static function restore(): void {
		foreach ( self::$pinned as $name => $snapshot ) {
			$GLOBALS[ $name ] = $snapshot;
		}
	}

	private static function capture( string $kind ): self {
		if ( self::$sealed ) {
			throw new \LogicException( 'WPBench\Runtime\Preservation: snapshots are taken in runtime_checks.setup, before the candidate runs; capturing later is refused.' );
		}
		$handle                     = \count( self::$snapshots );
		self::$snapshots[ $handle ] = array(
			'kind'    => $kind,
			'records' => self::read( $kind, null ),
		);
		return new self( $handle );
	}

	/**
	 * The stored state of records (all of the kind when $ids is null), from the database rows.
	 *
	 * @param list<int>|null $ids
	 * @return array<int, array{fields: array<string, mixed>, meta: array<string, list<mixed>>, terms?: array<string, list<int>>}>
	 */
	private static function read( string $kind, ?array $ids ): array {
		global $wpdb;
		$table      = 'posts' === $kind ? $wpdb->posts : $wpdb->users;
		$meta_table = 'posts' === $kind ? $wpdb->postmeta : $wpdb->usermeta;
		$meta_id    = 'posts' === $kind ? 'post_id' : 'user_id';
		$meta_order = 'posts' === $kind ? 'meta_id' : 'umeta_id';
		$where      = 'posts' === $kind ? "post_type <> 'revision'" : '1=1';
		$in         = null === $ids ? '' : ( $ids ? ' AND ID IN (' . \implode( ',', \array_map( 'intval', $ids ) ) . ')' : ' AND 1=0' );
		$records    = array();
		foreach ( (array) $wpdb->get_results( "SELECT * FROM $table WHERE $where$in ORDER BY ID", \ARRAY_A ) as $row ) {
			foreach ( self::DERIVED_POST_FIELDS as $derived ) {
				unset( $row[ $derived ] );
			}
			$records[ (int) $row['ID'] ] = array( 'fields' => $row, 'meta' => array() );
			if ( 'posts' === $kind ) {
				$records[ (int) $row['ID'] ]['terms'] = \array_fill_keys( self::POST_TAXONOMIES, array() );
			}
		}
		if ( ! $records ) {
			return $records;
		}
		$list = \implode( ',', \array_keys( $records ) );
		foreach ( (array) $wpdb->get_results( "SELECT $meta_id AS owner, meta_key, meta_value FROM $meta_table WHERE $meta_id IN ($list) ORDER BY $meta_order", \ARRAY_A ) as $meta ) {
			$records[ (int) $meta['owner'] ]['meta'][ (string) $meta['meta_key'] ][] = $meta['meta_value'];
		}
		if ( 'posts' === $kind ) {
			self::add_derived_fields( $records );
			$taxonomies = "'" . \implode( "','", self::POST_TAXONOMIES ) . "'";
			$rows       = $wpdb->get_results( "SELECT tr.object_id AS owner, tt.taxonomy, tt.term_id FROM {$wpdb->term_relationships} tr JOIN {$wpdb->term_taxonomy} tt ON tt.term_taxonomy_id = tr.term_taxonomy_id WHERE tr.object_id IN ($list) AND tt.taxonomy IN ($taxonomies)", \ARRAY_A );
			foreach ( (array) $rows as $term ) {
				$records[ (int) $term['owner'] ]['terms'][ (string) $term['taxonomy'] ][] = (int) $term['term_id'];
			}
			foreach ( $records as &$record ) {
				foreach ( $record['terms'] as &$term_ids ) {
					\sort( $term_ids );
				}
				unset( $term_ids );
			}
			unset( $record );
		}
		return $records;
	}

	/**
	 * WP_Post::to_array()'s derived fields that are compared: `ancestors` (the post_parent chain, as
	 * get_post_ancestors() walks it) and `page_template` (the first _wp_page_template value, or '').
	 *
	 * @param array<int, array<string, mixed>> $records
	 */
	private static function add_derived_fields( array &$records ): void {
		global $wpdb;
		$parents = array();
		foreach ( (array) $wpdb->get_results( "SELECT ID, post_parent FROM $wpdb->posts", \ARRAY_A ) as $row ) {
			$parents[ (int) $row['ID'] ] = (int) $row['post_parent'];
		}
		foreach ( $records as $id => &$record ) {
			$chain  = array();
			$parent = $parents[ $id ] ?? 0;
			while ( $parent > 0 && $parent !== $id && ! \in_array( $parent, $chain, true ) ) {
				$chain[] = $parent;
				$parent  = $parents[ $parent ] ?? 0;
			}
			$record['fields']['ancestors']     = $chain;
			$record['fields']['page_template'] = (string) ( $record['meta']['_wp_page_template'][0] ?? '' );
		}
		unset( $record );
	}

	/**
	 * @param array<string, mixed> $was
	 * @param array<string, mixed> $is
	 * @param array<string, mixed> $allow
	 * @return list<string>
	 */
	private static function compare( int $id, array $was, array $is, array $allow ): array {
		$found  = array();
		$fields = $allow['fields'] ?? array();
		foreach ( \array_unique( \array_merge( \array_keys( $was['fields'] ), \array_keys( $is['fields'] ) ) ) as $field ) {
			if ( ! \in_array( $field, $fields, true ) && ( $was['fields'][ $field ] ?? null ) !== ( $is['fields'][ $field ] ?? null ) ) {
				$found[] = "record $id: field $field changed";
			}
		}
		$keys     = $allow['meta'] ?? array();
		$prefixes = $allow['meta_prefixes'] ?? array();
		foreach ( \array_unique( \array_merge( \array_keys( $was['meta'] ), \array_keys( $is['meta'] ) ) ) as $key ) {
			$key = (string) $key;
			if ( \in_array( $key, $keys, true ) ) {
				continue;
			}
			foreach ( $prefixes as $prefix ) {
				if ( '' !== $prefix && \str_starts_with( $key, $prefix ) ) {
					continue 2;
				}
			}
			if ( ( $was['meta'][ $key ] ?? null ) !== ( $is['meta'][ $key ] ?? null ) ) {
				$found[] = "record $id: meta $key changed";
			}
		}
		$taxonomies = $allow['terms'] ?? array();
		foreach ( $was['terms'] ?? array() as $taxonomy => $term_ids ) {
			if ( ! \in_array( $taxonomy, $taxonomies, true ) && $term_ids !== ( $is['terms'][ $taxonomy ] ?? array() ) ) {
				$found[] = "record $id: $taxonomy terms changed";
			}
		}
		return $found;
	}
}
